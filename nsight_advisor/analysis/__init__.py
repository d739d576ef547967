"""The analysis layer: facts computed from the store that every rule and report shares, with no findings in them.

The window and the time partition (``accounting``), iterations and the steady-state window (``iterations``,
``steady``), pacing, ranks and collectives (``ranks``), the GPU named on the command line (``gpu_override``),
the per-capture summary (``summary``) and the description ``info`` prints (``describe``). The views in
``schema/views`` are the SQL half of this layer.
"""
