module github.com/gossipd/gossipd

go 1.26

require (
	golang.org/x/sys v0.38.0
	gonum.org/v1/gonum v0.17.0
)

require gopkg.in/yaml.v3 v3.0.1
