"""One package per notebook (``nb00`` … ``nb13``): its explorers, its checkers, its toy
tasks and shipped weights. The library never imports a lesson."""
