"""The user's data: the tree of containers and leaves every walk of it reads (tree.py)."""
