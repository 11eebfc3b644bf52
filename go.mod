module github.com/gossipd/gossipd

go 1.26
