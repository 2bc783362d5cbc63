"""What several compressors share: sparse selection and thresholding passes
(:mod:`.sparse`, :mod:`.threshold_stats`, :mod:`.fused`), SIDCo's distribution fits
(:mod:`.sidco_fits`), PowerSGD's matrix shape (:mod:`.lowrank_shape`), the payload models of the
analytic specs (:mod:`.payloads`), the compute-time calibration (:mod:`.calibration`), and
:mod:`.lazy` (torch imported on first use, so loading the specs imports no torch).
"""
