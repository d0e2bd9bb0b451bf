/* sum(X*Y*Z) over three 100000 x 1000 CSR matrices of sparsity argv[1], by method argv[2]:
 * 0 scatter Y's and Z's row into dense buffers, walk X's row, clear by index (the skeleton's
 * method); 1 the same with a software prefetch argv[3] rows ahead; 2 a three-way merge over the
 * sorted column indexes; 3 bitmaps of the rows' columns with ranks for the values; 4 method 0 in
 * separate functions with a Kahan sum; 5 method 0 with a scalar Kahan sum; 6 only the
 * scatter and clear; 7 only the walk over X; 8 the walk with eight accumulators; 9 blocks of
 * argv[3] rows. Beside a plain read of the three matrices' arrays.
 *   gcc -O3 -march=native -fopenmp sparse_cell_methods.c && ./a.out 0.1 0 2 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <omp.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {uint32_t*idx;double*val;long*rp;long nnz;} csr;
static uint64_t st=88172645463325252ull; static inline uint64_t xr(){st^=st<<13;st^=st>>7;st^=st<<17;return st;}
static csr gen(long m,long n,double sp,unsigned seed){csr c;long cap=(long)(m*n*sp*1.2)+m;c.idx=malloc(cap*4);c.val=malloc(cap*8);c.rp=malloc((m+1)*8);long k=0;st+=seed*7919;c.rp[0]=0;
 uint64_t thr=(uint64_t)(sp*18446744073709551615.0);
 for(long i=0;i<m;i++){for(long j=0;j<n;j++){if(xr()<thr){c.idx[k]=j;c.val[k]=1.0+j*1e-3;k++;}}c.rp[i+1]=k;} c.nnz=k; return c;}
__attribute__((noinline)) static void scat(const csr*S,long i,double*b){for(long p=S->rp[i];p<S->rp[i+1];p++) b[S->idx[p]]=S->val[p];}
__attribute__((noinline)) static void clr(const csr*S,long i,double*b){for(long p=S->rp[i];p<S->rp[i+1];p++) b[S->idx[p]]=0;}
__attribute__((noinline)) static double walk(const csr*X,long i,const double*yb,const double*zb){double s=0,c=0;for(long p=X->rp[i];p<X->rp[i+1];p++){ uint32_t j=X->idx[p]; double t=X->val[p]*yb[j]*zb[j]; double y=t-c; double u=s+y; c=(u-s)-y; s=u;} return s;}
typedef double (*walkfn)(const csr*,long,const double*,const double*);
volatile walkfn WF=walk;
#define PF(p) __builtin_prefetch((const void*)(p),0,3)
int main(int argc,char**argv){
  long m=100000,n=1000; double sp=atof(argv[1]); int variant=atoi(argv[2]); int dist=argc>3?atoi(argv[3]):2;
  csr X=gen(m,n,sp,1),Y=gen(m,n,sp,2),Z=gen(m,n,sp,3);
  for(int rep=0;rep<7;rep++){
    double t0=now(), s=0;
    #pragma omp parallel reduction(+:s)
    { double*yb=calloc(n*64,8),*zb=calloc(n*64,8);
      if(variant==9){
        long B=dist; int nt=omp_get_num_threads(), t=omp_get_thread_num(); long lo=m*t/nt, hi=m*(t+1)/nt;
        for(long r=lo;r<hi;r+=B){ long e=r+B<hi?r+B:hi;
          for(long i=r;i<e;i++){double*yr=yb+(i-r)*n; for(long p=Y.rp[i];p<Y.rp[i+1];p++) yr[Y.idx[p]]=Y.val[p];}
          for(long i=r;i<e;i++){double*zr=zb+(i-r)*n; for(long p=Z.rp[i];p<Z.rp[i+1];p++) zr[Z.idx[p]]=Z.val[p];}
          for(long i=r;i<e;i++){const double*yr=yb+(i-r)*n,*zr=zb+(i-r)*n; for(long p=X.rp[i];p<X.rp[i+1];p++){ uint32_t j=X.idx[p]; s+=X.val[p]*yr[j]*zr[j]; }}
          for(long i=r;i<e;i++){double*yr=yb+(i-r)*n; for(long p=Y.rp[i];p<Y.rp[i+1];p++) yr[Y.idx[p]]=0;}
          for(long i=r;i<e;i++){double*zr=zb+(i-r)*n; for(long p=Z.rp[i];p<Z.rp[i+1];p++) zr[Z.idx[p]]=0;}
        }
      } else
      #pragma omp for schedule(static)
      for(long i=0;i<m;i++){
        if(variant==1 && i+dist<m){
          long a; 
          for(a=X.rp[i+dist];a<X.rp[i+dist+1];a+=16) {PF(X.idx+a);} for(a=X.rp[i+dist];a<X.rp[i+dist+1];a+=8) PF(X.val+a);
          for(a=Y.rp[i+dist];a<Y.rp[i+dist+1];a+=16) {PF(Y.idx+a);} for(a=Y.rp[i+dist];a<Y.rp[i+dist+1];a+=8) PF(Y.val+a);
          for(a=Z.rp[i+dist];a<Z.rp[i+dist+1];a+=16) {PF(Z.idx+a);} for(a=Z.rp[i+dist];a<Z.rp[i+dist+1];a+=8) PF(Z.val+a);
        }
        if(variant==2){
          /* 3-way merge join */
          long px=X.rp[i],ex=X.rp[i+1],py=Y.rp[i],ey=Y.rp[i+1],pz=Z.rp[i],ez=Z.rp[i+1];
          while(px<ex&&py<ey&&pz<ez){
            uint32_t a=X.idx[px],b=Y.idx[py],c=Z.idx[pz];
            if(a==b&&b==c){s+=X.val[px]*Y.val[py]*Z.val[pz];px++;py++;pz++;}
            else { uint32_t mx=a>b?a:b; mx=mx>c?mx:c; px+=(a<mx); py+=(b<mx); pz+=(c<mx);} 
          }
          continue;
        }
        if(variant==3){
          /* bitmap of Y and Z columns; X walk tests bits; values fetched by scatter-free rank */
          uint64_t by[16]={0},bz[16]={0};
          for(long p=Y.rp[i];p<Y.rp[i+1];p++){uint32_t j=Y.idx[p]; by[j>>6]|=1ull<<(j&63);}
          for(long p=Z.rp[i];p<Z.rp[i+1];p++){uint32_t j=Z.idx[p]; bz[j>>6]|=1ull<<(j&63);}
          uint64_t bx[16]={0};
          for(long p=X.rp[i];p<X.rp[i+1];p++){uint32_t j=X.idx[p]; bx[j>>6]|=1ull<<(j&63);}
          int ry=0,rz=0,rx=0;
          for(int w=0;w<16;w++){
            uint64_t both=bx[w]&by[w]&bz[w];
            while(both){ int b=__builtin_ctzll(both); uint64_t below=(1ull<<b)-1;
              s+=X.val[X.rp[i]+rx+__builtin_popcountll(bx[w]&below)]*Y.val[Y.rp[i]+ry+__builtin_popcountll(by[w]&below)]*Z.val[Z.rp[i]+rz+__builtin_popcountll(bz[w]&below)];
              both&=both-1;}
            rx+=__builtin_popcountll(bx[w]); ry+=__builtin_popcountll(by[w]); rz+=__builtin_popcountll(bz[w]);
          }
          continue;
        }
        if(variant==6){ for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=Y.val[p];
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=Z.val[p];
        for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=0;
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=0; s+=yb[i%n]; continue;}
        if(variant==7){ for(long p=X.rp[i];p<X.rp[i+1];p++){ uint32_t j=X.idx[p]; s+=X.val[p]*yb[j]*zb[j]; } continue;}
        if(variant==8){ double a[8]={0}; long p=X.rp[i],e=X.rp[i+1]; for(;p+8<=e;p+=8){ for(int l=0;l<8;l++){uint32_t j=X.idx[p+l]; a[l]+=X.val[p+l]*yb[j]*zb[j];}} for(;p<e;p++){uint32_t j=X.idx[p]; a[0]+=X.val[p]*yb[j]*zb[j];} s+=((a[0]+a[1])+(a[2]+a[3]))+((a[4]+a[5])+(a[6]+a[7])); continue;}
        if(variant==4){ scat(&Y,i,yb); scat(&Z,i,zb); s+=WF(&X,i,yb,zb); clr(&Y,i,yb); clr(&Z,i,zb); continue; }
        if(variant==5){ double c=0,ss=0; for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=Y.val[p];
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=Z.val[p];
        for(long p=X.rp[i];p<X.rp[i+1];p++){ uint32_t j=X.idx[p]; double t=X.val[p]*yb[j]*zb[j]; double y=t-c; double u=ss+y; c=(u-ss)-y; ss=u;} s+=ss;
        for(long p=Y.rp[i];p<Y.rp[i+1];p++) yb[Y.idx[p]]=0;
        for(long p=Z.rp[i];p<Z.rp[i+1];p++) zb[Z.idx[p]]=0; continue;}
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
    printf("v%d %.1f ms  read %.1f ms (%.0f%%) %g\n",variant,(t1-t0)*1e3,(t2-t1)*1e3,100*(t2-t1)/(t1-t0),s);
  }
}
