"""Launchers: one table and one reader of the environment, shared by check, probe and lint.

Pure (functions of an environment mapping; no torch, no I/O):

* :mod:`gpudiag.launch.table`: one row per launcher (its variables, how it is
  detected, its start command, its hints). Adding a launcher = one row plus its tests.
* :mod:`gpudiag.launch.ints`: the one strict integer reader and the variables' ranges.
* :mod:`gpudiag.launch.reader`: every launcher's variables as one ``Launch`` (check).
* :mod:`gpudiag.launch.process`: this process's rank and world size (probe).
* :mod:`gpudiag.launch.deepspeed`: the devices DeepSpeed's runner gives its workers.
"""
