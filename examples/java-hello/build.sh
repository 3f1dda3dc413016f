#!/bin/sh
# Builds hello.jar next to this script, from Hello.java (needs a JDK: javac and jar).
set -eu
cd "$(dirname "$0")"
rm -rf build && mkdir build
javac -d build Hello.java
jar --create --file hello.jar --main-class Hello -C build .
rm -rf build
echo "built $(pwd)/hello.jar"
