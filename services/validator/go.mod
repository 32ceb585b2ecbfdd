module github.com/contentledger/contentledger/services/validator

go 1.26

require github.com/contentledger/contentledger/pkg v0.0.0

replace github.com/contentledger/contentledger/pkg => ../../pkg
