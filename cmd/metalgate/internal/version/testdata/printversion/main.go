// Command printversion prints version.String(): TestLinkerFlags builds it with the Makefile's
// -X flags, as make build builds metalgate.
package main

import (
	"fmt"

	"github.com/metalgate/metalgate/cmd/metalgate/internal/version"
)

func main() { fmt.Println(version.String()) }
