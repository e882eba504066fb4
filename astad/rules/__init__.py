"""The rule tables: scalar, array and linear-algebra primitives and custom rules, one
table serving every mode."""
