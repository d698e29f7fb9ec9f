package main

import (
	"fmt"
	"os"
	"time"
)

// A Go program that never says hello: the host must fail its start with the
// stderr tail, not wait forever.
func main() {
	fmt.Fprintln(os.Stderr, "silent agent: I do not speak the protocol")
	time.Sleep(time.Hour)
}
