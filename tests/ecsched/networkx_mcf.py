"""Reads ECSched networks (one JSON object a line) and prints the min-cost-flow optimum of each,
solved by networkx's network simplex: the independent check of control::ecsched.

Each line: {"units": [{"edges": [[host, cost], ...], "apart": group or null}], "slots": [...],
"unscheduled": cost of a unit -> unscheduled edge, "gated": bool}. Built here from the paper's
§3.2: every unit node supplies 1; unit -> host (or -> gate(group, host) -> host when gated),
capacity 1; unit -> U, capacity 1; host -> t, capacity slots; U -> t, capacity n.
"""
import json
import sys

import networkx as nx

for line in sys.stdin:
    net = json.loads(line)
    units = net["units"]
    n = len(units)
    g = nx.DiGraph()
    g.add_node("t", demand=n)
    g.add_node("U", demand=0)
    g.add_edge("U", "t", capacity=n, weight=0)
    for i, unit in enumerate(units):
        u = ("u", i)
        g.add_node(u, demand=-1)
        g.add_edge(u, "U", capacity=1, weight=net["unscheduled"])
        for host, cost in unit["edges"]:
            h = ("h", host)
            if h not in g:
                g.add_edge(h, "t", capacity=net["slots"][host], weight=0)
            if net["gated"] and unit["apart"] is not None:
                gate = ("g", unit["apart"], host)
                if gate not in g:
                    g.add_edge(gate, h, capacity=1, weight=0)
                g.add_edge(u, gate, capacity=1, weight=cost)
            else:
                g.add_edge(u, h, capacity=1, weight=cost)
    print(nx.min_cost_flow_cost(g) if n else 0, flush=True)
