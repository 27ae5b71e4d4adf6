"""Task families beyond person re-identification, as upstream FastReID's ``projects/`` are.

Each family is a package that registers its data sets, heads and meta architectures when it is
imported and has an ``add_*_config(cfg)`` adding its config keys. A config file that names one
of a family's names imports it by itself (:mod:`fastreid.config.families`), and the standard
``fastreid-train`` command trains it (:mod:`fastreid.engine.trainers`).

- :mod:`fastreid.projects.attr`: pedestrian attribute recognition (upstream's FastAttr).
- :mod:`fastreid.projects.partial`: partial re-identification, DSR (upstream's PartialReID).
- :mod:`fastreid.projects.distill`: overhaul feature distillation (upstream's FastDistill).
- :mod:`fastreid.projects.retri`: image retrieval, CUB / Cars-196 / SOP / In-Shop (upstream's FastRetri).
- :mod:`fastreid.projects.face`: face recognition with Partial FC (upstream's FastFace).
- :mod:`fastreid.projects.clas`: image classification (upstream's FastClas).
- :mod:`fastreid.projects.uda`: unsupervised / domain-adaptive re-ID, Cluster Contrast (the code
  upstream's CrossDomainReID promised).
"""
