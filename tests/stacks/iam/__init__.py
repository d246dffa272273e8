"""IAM conformance: the AWS calls the deployed code really makes, checked against the synthesized policies.

- :mod:`.recorder`: records every botocore API call (and every presigned URL) made while a principal acts;
- :mod:`.permissions`: turns one recorded call into the IAM permissions AWS checks for it (action, resource ARN,
  condition keys), including what Athena does with the caller's credentials;
- :mod:`.template`: the synthesized template with its intrinsics resolved for one account and Region, the
  policies attached to a role, and their evaluation with moto's IAM policy evaluator;
- :mod:`.scenarios`: the deployment on moto and its functions run as their own principals; :mod:`.capacity`: the
  capacity budget's paths (a permit taken and released; a slot given back to a deferral schedule).
"""
