#!/usr/bin/env python3
"""Finds import circles between the modules of every crate under DIR (default: crates): module A uses an item
of module B and B, directly or through others, one of A's. A child using its ancestors' items (`super::`) is not
a circle. Prints each circle; exits 1 when there is one (make test runs it)."""
import os, re, sys
root=sys.argv[1] if len(sys.argv) > 1 else 'crates'
def modpath(crate_src, f):
    rel=os.path.relpath(f, crate_src)[:-3].split('/')
    if rel[-1] in ('lib','main','mod'): rel=rel[:-1]
    return tuple(rel)
edges=set(); files={}
for crate in sorted(os.listdir(root)):
    src=os.path.join(root,crate,'src')
    if not os.path.isdir(src): continue
    mods={}
    for d,_,fs in os.walk(src):
        for f in fs:
            if f.endswith('.rs'):
                p=os.path.join(d,f); mp=modpath(src,p); mods[mp]=p
    for mp,p in mods.items():
        t=open(p).read()
        t=t.split('#[cfg(test)]')[0]
        refs=set()
        for m in re.finditer(r'\bcrate::((?:[a-z_0-9]+::)*[a-z_0-9]+)', t):
            refs.add(tuple(m.group(1).split('::')))
        for m in re.finditer(r'\b((?:super::)+)((?:[a-z_0-9]+::)*[a-z_0-9]+)', t):
            up=m.group(1).count('super::')
            base=mp[:len(mp)-up] if up<=len(mp) else ()
            refs.add(base+tuple(m.group(2).split('::')))
        for r in refs:
            # longest module prefix
            for k in range(len(r),-1,-1):
                if r[:k] in mods:
                    tgt=r[:k]; break
            if tgt==mp: continue
            if mp[:len(tgt)]==tgt: continue  # child -> ancestor
            edges.add(((crate,mp),(crate,tgt)))
# SCC
from collections import defaultdict
g=defaultdict(set)
for a,b in edges: g[a].add(b)
index={}; low={}; st=[]; on=set(); sccs=[]; c=[0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v]=low[v]=c[0]; c[0]+=1; st.append(v); on.add(v)
    for w in g[v]:
        if w not in index: sc(w); low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],index[w])
    if low[v]==index[v]:
        comp=[]
        while True:
            w=st.pop(); on.discard(w); comp.append(w)
            if w==v: break
        if len(comp)>1: sccs.append(comp)
for v in list(g):
    if v not in index: sc(v)
for s in sccs: print('CYCLE:', ' <-> '.join(f"{c}::{'::'.join(m) or 'lib'}" for c,m in s))
sys.exit(1 if sccs else 0)
