from react.backends.sim.engine import SimBackend
