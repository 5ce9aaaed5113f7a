// Command schemagen writes the JSON Schema of the wire contract
// (docs/schema/, docs/API.md "Schema"): `make schema` runs it from the
// repository root.
//
//	go run ./internal/schema/schemagen [-api ./sandboxapi] [-out docs/schema]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandboxcore/sandboxcore/internal/schema"
)

func main() {
	api := flag.String("api", "./sandboxapi", "directory of package sandboxapi (its doc comments become descriptions)")
	out := flag.String("out", "docs/schema", "directory to write the schema files into")
	flag.Parse()
	files, err := schema.Generate(*api)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(*out, name), data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("wrote", filepath.Join(*out, name))
	}
}
