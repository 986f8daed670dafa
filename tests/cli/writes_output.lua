-- Writes one file with perfsim.write (needs --output-dir).
perfsim.write("result.txt", "42\n")
