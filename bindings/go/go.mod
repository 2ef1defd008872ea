module ember.dev/go/ember

go 1.19
