"""What tests share: waiting, processes, handler modules for workers, and the setups several
test modules build (schedules, workers, forms). Test modules import from here, never from
each other."""
