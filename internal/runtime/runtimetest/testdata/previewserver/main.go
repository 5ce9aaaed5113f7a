// Command previewserver is a small real HTTP server for the preview URL
// tests: run inside a runtime as `previewserver PORT`, it answers every
// request with "preview <path>: " and the contents of ./index.txt (the
// workspace's file, so a test sees the runtime's own view).
package main

import (
	"fmt"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: previewserver PORT")
		os.Exit(2)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile("index.txt")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "preview %s: %s", r.URL.Path, b)
	})
	if err := http.ListenAndServe(":"+os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
