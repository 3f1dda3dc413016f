job "web" {
  group "app" {
    count =
  }
}
