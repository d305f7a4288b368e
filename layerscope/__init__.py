"""layerscope's Python surface for notebooks and scripts: :mod:`layerscope.results`."""
