job "web" {
  group "app" {
    count = 1
  }
}
