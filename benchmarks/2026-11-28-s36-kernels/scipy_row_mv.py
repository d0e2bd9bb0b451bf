import numpy as np, scipy.sparse as sps, time, sys
m=int(sys.argv[1]); sp=float(sys.argv[2])
X=sps.random(m,1000,density=sp,format='csr',random_state=1); v=np.random.rand(1000); w=np.random.rand(m)
def f(): return X.T @ (w * (X @ v))
f(); reps=50; s=time.perf_counter()
for _ in range(reps): f()
print("scipy ms_per_rep %.3f" % ((time.perf_counter()-s)/reps*1e3))
