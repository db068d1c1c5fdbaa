"""The shipped scenes (``*.yaml``), their robot descriptions and meshes (``robots/``) and study
definitions (``studies/``): a data package, installed as ``convexsim.scenes`` and found through
``importlib.resources`` (see ``convexsim.scene.shipped_scenes_dir``). No code lives here."""
