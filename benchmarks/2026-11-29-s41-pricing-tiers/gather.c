#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  long m=100000,n=1000; double sp=atof(argv[1]);
  double *Y=aligned_alloc(64,m*n*8),*Z=aligned_alloc(64,m*n*8);
  #pragma omp parallel for
  for(long i=0;i<m*n;i++){Y[i]=(i%7)*0.5;Z[i]=(i%5)*0.25;}
  long cap=(long)(m*n*sp*1.2)+m; uint32_t*idx=malloc(cap*4); double*val=malloc(cap*8); long*rp=malloc((m+1)*8);
  long k=0; srand(1); rp[0]=0;
  for(long i=0;i<m;i++){for(long j=0;j<n;j++){ if((double)rand()/RAND_MAX<sp){idx[k]=j;val[k]=1.0+j*1e-3;k++;}} rp[i+1]=k;}
  printf("nnz %ld\n",k);
  for(int rep=0;rep<5;rep++){
    double t0=now(), s1=0,s2=0;
    #pragma omp parallel for reduction(+:s1,s2) schedule(static)
    for(long i=0;i<m;i++){ const double*y=Y+i*n,*z=Z+i*n; for(long p=rp[i];p<rp[i+1];p++){ s1+=val[p]*y[idx[p]]; s2+=val[p]*z[idx[p]]; } }
    double t1=now(), r=0;
    #pragma omp parallel for reduction(+:r) schedule(static)
    for(long i=0;i<m*n;i++){ r+=Y[i]+Z[i]; }
    double t2=now(), q=0;
    #pragma omp parallel for reduction(+:q) schedule(static)
    for(long p=0;p<k;p++){ q+=val[p]+idx[p]; }
    double t3=now();
    double gb_lines = 0; // touched lines
    printf("gather %.1f ms  stream Y+Z %.1f ms (%.1f GB/s)  csr read %.1f ms (%.1f GB/s) %g %g %g\n",(t1-t0)*1e3,(t2-t1)*1e3,16.0*m*n/(t2-t1)/1e9,(t3-t2)*1e3,12.0*k/(t3-t2)/1e9,s1,s2,r+q);
  }
}
