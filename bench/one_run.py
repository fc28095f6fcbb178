"""One permutation run (for callgrind / hyperfine): prints the run counters as JSON.

valgrind --tool=callgrind --toggle-collect='*Engine::run*' python bench/one_run.py 1024
"""

import json
import sys

import rfabric as rf

gpus = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
fab = rf.topologies.FatTree(gpus=gpus, link="100Gbps", radix=16)
res = rf.simulate(fab, rf.Flows.permutation(gpus, 2_000_000, seed=1), mtu_bytes=4096, seed=1)
print(json.dumps({k: res.run[k] for k in ("events", "packets", "packet_hops", "makespan_ps", "flows_done")}))
