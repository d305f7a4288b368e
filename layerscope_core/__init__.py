"""The bottom layer: the registry of families, tasks, methods, presets, eval lengths and
patching sites (``layerscope_core.registry``), the layer helpers every layer shares
(``layerscope_core.layers``) and input text checks. Imports nothing from the project.
"""
