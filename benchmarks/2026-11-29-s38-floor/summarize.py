import collections,statistics,sys
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)==3: d[(p[0],p[1])].append(float(p[2]))
for k in sorted(d): v=sorted(d[k]); print(k, 'min %.1f q1 %.1f med %.1f max %.1f'%(v[0],v[len(v)//4],statistics.median(v),v[-1]))
