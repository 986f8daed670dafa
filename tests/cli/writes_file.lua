local f = io.open("/tmp/perfsim_writes_file.txt", "w")
f:write("x")
