import numpy as np, time
r=np.random.default_rng(1); R=r.random((2000,20)); HS=r.random((2000,20)); S=r.random((2000,20)); n=2000; a=0.5
t0=time.perf_counter()
for i in range(n): R = R - a*HS; a*=0.999
t1=time.perf_counter()
for i in range(n): s=float(np.sum(R*R)); a+= s*1e-30
t2=time.perf_counter()
for i in range(n): S = R + a*S; a*=0.999
t3=time.perf_counter()
for i in range(n): T = R*2; a+=T[0,0]*1e-30
t4=time.perf_counter()
print("R-a*HS us", (t1-t0)/n*1e6); print("sum(R^2) us", (t2-t1)/n*1e6); print("R+a*S us",(t3-t2)/n*1e6); print("R*2 us",(t4-t3)/n*1e6)
