"""The ``stateflow`` command line. One module per command group; ``main`` wires them."""
