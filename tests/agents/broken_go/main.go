package main

// This agent does not compile: the host must report the compiler's message
// and mark it FATAL instead of crash-looping.
func main() {
	undefinedFunction()
}
