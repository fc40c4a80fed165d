"""Reference implementations of the kit's assignments, one module per assignment.

`solutions.attention` is the single source of the solution regions of
`source/attention/attention.ipynb`: the notebook builder copies each function from it,
and a test proves the committed notebooks are current.
"""
