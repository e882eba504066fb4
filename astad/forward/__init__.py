"""Forward mode: the dual-numbers forward transform (primal and tangent)."""
