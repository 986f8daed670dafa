return profile {
  name = "bad", base = "H100-SXM",
  memory_bandwidth = 0/0,
}
