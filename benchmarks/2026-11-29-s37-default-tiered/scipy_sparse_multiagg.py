# scipy's sum(X*Y) + sum(X*Z) over three CSR matrices of n x 1000 at density d, ms a run
# (after 3 warm-up runs, the mean of 20), as sparse_multiagg.dml times lafuse's.
# usage: python scipy_sparse_multiagg.py 10000 0.01
import scipy.sparse as sp, time, sys
n=int(sys.argv[1]); d=float(sys.argv[2])
X=sp.random(n,1000,density=d,format='csr',random_state=1); Y=sp.random(n,1000,density=d,format='csr',random_state=2); Z=sp.random(n,1000,density=d,format='csr',random_state=3)
ts=[]
for i in range(23):
    t=time.perf_counter(); a=X.multiply(Y).sum(); b=X.multiply(Z).sum(); ts.append(time.perf_counter()-t)
ts=ts[3:]; print("scipy_magg_ms", sum(ts)/len(ts)*1e3)
