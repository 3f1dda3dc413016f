job "web" {
  datacenters = ["dc1"]
}
