#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {uint32_t*idx;double*val;long*rp;long nnz;} csr;
static csr gen(long m,long n,double sp,unsigned seed){csr c;long cap=(long)(m*n*sp*1.2)+m;c.idx=malloc(cap*4);c.val=malloc(cap*8);c.rp=malloc((m+1)*8);long k=0;srand(seed);c.rp[0]=0;
 for(long i=0;i<m;i++){for(long j=0;j<n;j++){if((double)rand()/RAND_MAX<sp){c.idx[k]=j;c.val[k]=1.0+j*1e-3;k++;}}c.rp[i+1]=k;} c.nnz=k; return c;}
int main(int argc,char**argv){
  long m=100000,n=1000; double sp=atof(argv[1]);
  csr X=gen(m,n,sp,1),Y=gen(m,n,sp,2),Z=gen(m,n,sp,3);
  printf("nnz %ld %ld %ld, bytes %.0f MB\n",X.nnz,Y.nnz,Z.nnz,12.0*(X.nnz+Y.nnz+Z.nnz)/1e6);
  for(int rep=0;rep<5;rep++){
    double t0=now(), s=0;
    #pragma omp parallel reduction(+:s)
    { double*yb=calloc(n,8),*zb=calloc(n,8);
      #pragma omp for schedule(static)
      for(long i=0;i<m;i++){
        for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=Y.val[p];
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=Z.val[p];
        for(long p=X.rp[i];p<X.rp[i+1];p++){ uint32_t j=X.idx[p]; s+=X.val[p]*yb[j]*zb[j]; }
        for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=0;
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=0;
      } free(yb); free(zb);}
    double t1=now(), q=0;
    #pragma omp parallel for reduction(+:q) schedule(static)
    for(long p=0;p<X.nnz;p++){ q+=X.val[p]+X.idx[p]+Y.val[p]+Y.idx[p]+Z.val[p]+Z.idx[p]; }
    double t2=now();
    printf("scatter-clear %.1f ms  plain read of the three CSR %.1f ms (%.1f GB/s) %g %g\n",(t1-t0)*1e3,(t2-t1)*1e3,12.0*3*X.nnz/(t2-t1)/1e9,s,q);
  }
}
