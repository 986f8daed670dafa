-- A profile that is not calibrated: calibrate --merge refuses it (tests/cli/cases.txt).
return profile { name = "plain", base = "H100-SXM", calibrated = false }
