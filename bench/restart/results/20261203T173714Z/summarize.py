import json,sys,glob,os,statistics as S
d=sys.argv[1]
def med(xs): return S.median(xs) if xs else float('nan')
rows=[]
for f in sorted(glob.glob(os.path.join(d,'latency-*.json')), key=lambda p:(p.split('-')[-1],p)):
    j=json.load(open(f)); name=os.path.basename(f)[8:-5]
    t=j['tools'].get('tend',{}); r=j['tools'].get('runit',{}); dc=j.get('default_config',{}).get('tend',{})
    def samp(x,k): return [s[k] for s in x.get('samples',[]) if s.get(k) is not None] if isinstance(x,dict) else []
    print("%-9s tend k->fork p50 %.2f p95 %.2f | runit k->fork p50 %.2f p95 %.2f | default first p50 %.2f p95 %.2f, elapsed p50 %.2f | load %s"%(
      name, t['fork_ms']['median'], t['fork_ms']['p95'], r['fork_ms']['median'], r['fork_ms']['p95'],
      dc['first_fork_ms']['median'], dc['first_fork_ms']['p95'], dc['elapsed_fork_ms']['median'], j['sys'].get('loadavg','')))
print("reaction = fork_ms - exit_ms per sample (kernel exit event -> replacement's fork event), p50:")
for f in sorted(glob.glob(os.path.join(d,'latency-*.json')), key=lambda p:(p.split('-')[-1],p)):
    j=json.load(open(f)); name=os.path.basename(f)[8:-5]
    out=[]
    for tool in ('tend','runit'):
        ss=j['tools'][tool]['samples']
        out.append("%s %.2f"%(tool, med([s['fork_ms']-s['exit_ms'] for s in ss if s.get('fork_ms') is not None and s.get('exit_ms') is not None])))
    dc=j['default_config']['tend']
    out.append("default first %.2f"%med([s['fork_ms']-s['exit_ms'] for s in dc['first'] if s.get('exit_ms') is not None and s.get('fork_ms') is not None]) if dc['first'] and 'exit_ms' in dc['first'][0] else "default first n/a")
    print("%-9s %s"%(name, " | ".join(out)))
