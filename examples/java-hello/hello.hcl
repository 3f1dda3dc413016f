# A JVM application run by the java driver: Hello.java, built beforehand into
# hello.jar (nothing is compiled at run time):
#
#   examples/java-hello/build.sh
#   herder run --var jar=$PWD/examples/java-hello/hello.jar examples/java-hello/hello.hcl
#   curl http://127.0.0.1:<port>/     (herder prints "port http is 127.0.0.1:<port>")
#
# Ctrl-C stops the JVM with SIGTERM, so its shutdown hook prints "goodbye".
# As root with herder-exec installed, the JVM runs as nobody in exec's runc
# container; elsewhere as a plain process. `herder drivers` says which.
#
# The "fetch" task stands in for an artifact: it copies the jar into the
# allocation's shared directory before the JVM starts.
variable "jar" {
  type        = string
  description = "The absolute path of hello.jar on this host"
}

job "java-hello" {
  group "web" {
    task "fetch" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/cp"
        args    = [var.jar, "${NOMAD_ALLOC_DIR}/data/hello.jar"]
      }
    }

    task "hello" {
      driver = "java"
      config {
        jar_path    = "alloc/data/hello.jar"
        jvm_options = ["-XX:+UseSerialGC"]
      }
      resources {
        cpu    = 200
        memory = 128
        network {
          port "http" {}
        }
      }
    }
  }
}
