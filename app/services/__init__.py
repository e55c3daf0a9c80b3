"""Long-running processes of the Procfile: worker, trigger, reaper."""
