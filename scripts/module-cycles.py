#!/usr/bin/env python3
"""Finds import circles between the modules of every crate under DIR (default: crates): module A uses an item
of module B and B, directly or through others, one of A's. A module uses another by a `crate::` or `super::` path
(groups in braces included), or a child of its own by the child's name; a child that uses an item its parent (or
any ancestor) defines, while that ancestor uses the child, closes a circle too. Prints each circle; exits 1 when
there is one (make test runs it)."""
import os, re, sys
root=sys.argv[1] if len(sys.argv) > 1 else 'crates'
def modpath(crate_src, f):
    rel=os.path.relpath(f, crate_src)[:-3].split('/')
    if rel == ['main'] and os.path.exists(os.path.join(crate_src, 'lib.rs')):
        return ('<main>',)  # a binary beside the library: a crate of its own, which uses the library by name
    if rel[-1] in ('lib','main','mod'): rel=rel[:-1]
    return tuple(rel)
def tree(t, i):
    """The paths of the use tree at t[i:] (`a::b`, `{a, b::{c, D}}`), each a tuple of segments; stops at
    anything else (`;`, `(`, `!`, a space)."""
    def parse(i):
        if i < len(t) and t[i] == '{':
            out=[]; i+=1
            while i < len(t):
                while i < len(t) and t[i] in ' \n\t,': i+=1
                if i < len(t) and t[i] == '}': return out, i+1
                sub, j = parse(i)
                if j == i: return out, i
                out+=sub; i=j
            return out, i
        m=re.match(r'[A-Za-z_0-9]+', t[i:])
        if not m: return [], i
        name=m.group(0); j=i+len(name)
        if t.startswith('::', j):
            sub, k = parse(j+2)
            return ([(name,)+s for s in sub] or [(name,)]), k
        if t.startswith(' as ', j):
            a=re.match(r' as [A-Za-z_0-9]+', t[j:]); j+=len(a.group(0)) if a else 0
        return [(name,)], j
    return parse(i)[0]
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
        if mp[-1:] == ('tests',): continue  # a test module (`#[cfg(test)] mod tests;`) uses what it tests
        t=open(p).read()
        t=t.split('#[cfg(test)]')[0]
        refs=set()
        for m in re.finditer(r'\b(crate|(?:super::)*super)::', t):
            up=m.group(1).count('super')
            base=() if m.group(1)=='crate' else (mp[:len(mp)-up] if up<=len(mp) else ())
            for leaf in tree(t, m.end()):
                refs.add(base+leaf)
        # A child module named as the first segment of a path (`use journal::Journal;`, `dcs::Settings`).
        for m in re.finditer(r'(?<![:\w])([a-z_0-9]+)::', t):
            if mp+(m.group(1),) in mods:
                refs.add(mp+(m.group(1),))
        for r in refs:
            # longest module prefix
            for k in range(len(r),-1,-1):
                if r[:k] in mods:
                    tgt=r[:k]; break
            if tgt==mp: continue
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
