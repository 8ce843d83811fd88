module github.com/sdfio/sdfio

go 1.26.0

require github.com/apache/beam/sdks/v2 v2.77.0

require github.com/golang-cz/devslog v0.0.17 // indirect
