"""Where a Driver's workers run beyond this machine: ``connect`` says which cluster (local
worker processes, or Ray) and joins it; ``ray_pool`` runs one backend's workers as Ray
actors under the same supervision rules as local ones (``supervisor/rules/``)."""
