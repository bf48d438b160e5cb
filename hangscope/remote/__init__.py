"""Every node of a multi-node job from one command: node sets, transports, shipping, fan-out.

The transports are engines users already have (OpenSSH, ``srun --overlap``, ``kubectl exec``);
each node runs the one-node pipeline (``hangscope dump --find SPEC --format json``) and the
answers are merged as one job (``hangscope.analyze.merge``). The commands hand it a typed
``NodeRequest`` (remote/request.py); remote/ never imports the commands or the CLI.
"""
