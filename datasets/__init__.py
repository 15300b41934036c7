"""Built-in problem definitions, registered through the ``crfopt_register_problems`` hook."""
