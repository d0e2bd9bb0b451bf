/* t(X) %*% y for a 100000 x 1000 CSR X of sparsity argv[1]: one thread over the rows in
 * order, against two threads each adding the non-zeros of its half of the columns (the same
 * sums in the same order; the second half walks each row from its end). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static uint64_t st=88172645463325252ull; static inline uint64_t xr(){st^=st<<13;st^=st>>7;st^=st<<17;return st;}
int main(int argc,char**argv){
  long m=100000,n=1000; double sp=atof(argv[1]);
  long cap=(long)(m*n*sp*1.2)+m; uint32_t*idx=malloc(cap*4); double*val=malloc(cap*8); long*rp=malloc((m+1)*8); long k=0; rp[0]=0;
  uint64_t thr=(uint64_t)(sp*18446744073709551615.0);
  for(long i=0;i<m;i++){for(long j=0;j<n;j++){if(xr()<thr){idx[k]=j;val[k]=1.0+j*1e-3;k++;}}rp[i+1]=k;}
  double*y=malloc(m*8); for(long i=0;i<m;i++) y[i]=(i%7)*0.1;
  double*o1=calloc(n,8),*o2=calloc(n,8);
  for(int rep=0;rep<5;rep++){
    double t0=now(); memset(o1,0,n*8);
    for(long i=0;i<m;i++){double w=y[i]; for(long p=rp[i];p<rp[i+1];p++) o1[idx[p]]+=val[p]*w;}
    double t1=now(); memset(o2,0,n*8); uint32_t mid=n/2;
    #pragma omp parallel num_threads(2)
    { int t=omp_get_thread_num(); double*loc=calloc(n,8);
      if(t==0){ for(long i=0;i<m;i++){double w=y[i]; for(long p=rp[i];p<rp[i+1];p++){uint32_t c=idx[p]; if(c>=mid) break; loc[c]+=val[p]*w;}} }
      else { for(long i=0;i<m;i++){double w=y[i]; for(long p=rp[i+1]-1;p>=rp[i];p--){uint32_t c=idx[p]; if(c<mid) break; loc[c]+=val[p]*w;}} }
      #pragma omp critical
      { for(uint32_t c=(t==0?0:mid); c<(t==0?mid:n); c++) o2[c]=loc[c]; }
      free(loc);
    }
    double t2=now();
    int same=memcmp(o1,o2,n*8)==0;
    printf("seq %.2f ms split %.2f ms same %d\n",(t1-t0)*1e3,(t2-t1)*1e3,same);
  }
}
