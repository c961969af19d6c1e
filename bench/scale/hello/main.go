// Command hello is the floor of one CLI exec: a Go program that prints one
// line and exits. bench/scale execs it beside each `tend status ID`, so the
// report can say how much of that exec is tend's own (the target: at most
// 1 ms above this, in the same run).
package main

import "fmt"

func main() { fmt.Println("hello") }
